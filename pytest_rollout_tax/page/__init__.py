"""The HTML page of a report: the leaderboard and verdict first, then every figure in plots."""
