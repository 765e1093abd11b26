"""Helpers shared by the tests: paths, the command line, real clusters, images and browsers."""
