"""What is read off a model and its traces: attribution methods (attribution/), head statistics and
knockout (heads/), readings for pages (readings.py: rollout, beam trees, CSV), timing laps for tools."""
