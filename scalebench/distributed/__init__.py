"""Running one experiment on several processes: process group, timed collectives, split
physics and tiles, per-rank statistics."""
