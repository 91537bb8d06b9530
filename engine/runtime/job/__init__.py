"""The analyze job: a frozen plan (plan.py), stages (profile, reduce, append, bins, write, publish) and the driver that calls them."""
