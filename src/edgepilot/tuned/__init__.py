"""The one settings decision below run, serve, bench, tune and fit: tuned profiles, pinning, policy."""
