"""`bergen web`: a read-only web gateway for spectators and tournament players.

An ordinary gRPC client of the game server (no database credentials, no organiser token, no
seat token): it serves a small site and a JSON + Server-Sent Events API built only on the
public read RPCs, so a browser sees exactly what a spectator may see through the API.
"""
