"""Plain references of the rules, kept in the tests to check the rules core against."""
