"""Tuners: every weight-tuning method behind one interface, and the outer tuning loop."""
