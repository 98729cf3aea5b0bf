"""Process mechanics, the ground floor: systemd notification, the background thread, what
the process lets go of at rest, lag timestamps for the benches."""
