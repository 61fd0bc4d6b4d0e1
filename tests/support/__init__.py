"""Test helpers: real servers on loopback, recorded runs, fixed panel states."""
