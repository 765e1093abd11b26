"""Replay: re-running archived rows' experiments (``rerun``) and comparing their results bit
for bit (``checks``)."""
