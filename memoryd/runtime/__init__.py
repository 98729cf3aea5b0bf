"""Process mechanics, the ground floor: systemd notification, background priority, what the
process lets go of at rest, lag timestamps for the benches."""
