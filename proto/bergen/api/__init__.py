"""What both sides of the `bergen.v1` API need: translation between domain values and
messages, the events' hash chain, and record signatures. The server and the clients import
this package; neither imports the other."""
