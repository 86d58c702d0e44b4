"""Unit tests of the pure rules engine (`bergen.domain`)."""
