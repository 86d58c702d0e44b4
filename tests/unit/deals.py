"""Crafted deals for the worked cases, each checked to be a full, realistic deal.

Every hand holds exactly one double unless said otherwise, so the lead is known; the other
doubles wait in the boneyard.
"""

from __future__ import annotations

from .support import make_deal

# Case 1: lead 6-6, 6-2 left, 6-4 right, 4-2 right (2|2 +2), then seat 0 draws 2-2 and plays it
# right (2|2* +3).
CASE1 = make_deal(
    ["6-6 4-6 0-1 0-3 1-3 1-5", "2-6 2-4 0-5 3-5 1-4 0-4"],
    front="2-2",
)

# Case 2: lead 3-3, 3-5 left, 5-1 left, 1-3 left (3|3* +3).
CASE2 = make_deal(["3-3 1-5 0-2 0-4 2-4 4-6", "3-5 1-3 0-6 2-6 5-6 0-1"])

# Case 3: lead 1-1, 1-3 left, 1-5 right: ends 3|5, then 3-5 at either end.
CASE3 = make_deal(["1-1 1-5 2-4 2-6 4-6 0-2", "1-3 3-5 0-4 0-6 4-5 5-6"])

# Going out: seat 0 leads 0-0 and plays its sixth tile 0-5 on the left for 5|5 (a double
# header); everything else goes on the right, where no header is made.
GO_OUT = make_deal(["0-0 1-2 3-4 5-6 1-3 0-5", "0-1 2-3 4-5 1-6 3-5 2-4"])
GO_OUT_PLAYS = [
    (1, "0-1", "right"),
    (0, "1-2", "right"),
    (1, "2-3", "right"),
    (0, "3-4", "right"),
    (1, "4-5", "right"),
    (0, "5-6", "right"),
    (1, "1-6", "right"),
    (0, "1-3", "right"),
    (1, "3-5", "right"),
]
GO_OUT_LAST = (0, "0-5", "left")

# A block with the fitting tiles in the reserve: the line reaches 6|6 with 0-6 and 5-6 as the
# reserve; seat 1 then draws all 14 drawable tiles (no 6 among them) and nobody fits.
# Left at the block: seat 0 {0-1, 0-2}; seat 1 {1-3, 1-4, 1-5} and the 14 drawn, among them
# every double but 6-6.
RESERVE_BLOCK = make_deal(
    ["6-6 3-6 3-4 4-6 0-1 0-2", "1-6 1-2 2-6 1-3 1-4 1-5"],
    reserve="0-6 5-6",
)
RESERVE_BLOCK_PLAYS = [
    (1, "1-6", "left"),
    (0, "3-6", "right"),
    (1, "1-2", "left"),
    (0, "3-4", "right"),
    (1, "2-6", "left"),
    (0, "4-6", "right"),
]

# A dead line: every 6 is on the line at 6|6 after ten plays; seat 0 then draws the 14
# drawable tiles (doubles 0-0..3-3 among them) before the hand blocks. Seat 1 keeps {2-3}.
DEAD_LINE = make_deal(["6-6 4-6 4-5 5-6 0-3 0-1", "1-6 1-2 2-6 0-6 3-6 2-3"])
DEAD_LINE_PLAYS = [
    (1, "1-6", "left"),
    (0, "4-6", "right"),
    (1, "1-2", "left"),
    (0, "4-5", "right"),
    (1, "2-6", "left"),
    (0, "5-6", "right"),
    (1, "0-6", "left"),
    (0, "0-3", "left"),
    (1, "3-6", "left"),
]

# Three seats: seat 0 leads 6-6 and holds every other 6 but 5-6 (in the reserve); seat 1 draws
# the 8 drawable tiles and passes; seat 2 faces the reserve alone and passes without drawing.
PASS3 = make_deal(
    ["6-6 0-6 1-6 2-6 3-6 4-6", "0-1 0-2 0-3 0-4 0-5 1-2", "1-3 1-4 1-5 2-3 2-4 2-5"],
    front="0-0 1-1 2-2 3-3 4-4 5-5 3-4 3-5",
    reserve="4-5 5-6",
)

# Two seats: the same shape: seat 1 draws all 14 and passes, facing a boneyard of 2.
PASS2 = make_deal(
    ["6-6 0-6 1-6 2-6 3-6 4-6", "0-1 0-2 0-3 0-4 0-5 1-2"],
    reserve="4-5 5-6",
)

# No double in any hand: a void deal under lowest_double.
VOID2 = make_deal(["0-1 0-2 0-3 0-4 0-5 0-6", "1-2 1-3 1-4 1-5 1-6 2-3"])
VOID3 = make_deal(["0-1 0-2 0-3 0-4 0-5 0-6", "1-2 1-3 1-4 1-5 1-6 2-3", "2-4 2-5 2-6 3-4 3-5 3-6"])

# Seat 0 holds 1-1, seat 1 holds 5-5: the lowest and the highest double are in different hands.
LOW_HIGH = make_deal(["1-1 0-2 0-3 0-4 2-3 2-4", "5-5 4-5 0-6 1-6 2-6 3-6"])

# Seat 1 of three holds the lowest double 0-0: play goes on with seat 2.
LEAD_SEAT1_OF_3 = make_deal(
    ["1-2 1-3 1-4 1-5 1-6 2-3", "0-0 0-1 0-2 0-3 0-4 3-6", "2-4 2-5 2-6 3-4 3-5 0-5"]
)

# Seat 0 leads 3-3; seat 1 holds no 3: it draws 0-4 (no fit), then 3-5 (fits).
ONE_THEN_PASS = make_deal(
    ["3-3 1-3 0-1 0-2 1-2 1-4", "0-5 0-6 1-5 1-6 2-5 2-6"],
    front="0-4 3-5",
)
FIRST_DRAW_FITS = make_deal(
    ["3-3 1-3 0-1 0-2 1-2 1-4", "0-5 0-6 1-5 1-6 2-5 2-6"],
    front="3-5 0-4",
)

# Lead 3-3, 3-5 left (5|3*), then 5-5 left: 5*|3*, no header; a double placed.
BONUS = make_deal(["3-3 5-5 0-1 0-2 1-2 1-4", "3-5 0-6 1-6 2-6 4-6 0-4"])

# Four seats: seat 3 holds the lowest double 0-0 (partnerships: side 1).
LEAD_SEAT3_OF_4 = make_deal(
    ["1-2 1-3 1-4 1-5 1-6", "2-3 2-4 2-5 2-6 3-4", "3-5 3-6 4-5 4-6 5-6", "0-0 0-1 0-2 0-3 0-4"]
)
