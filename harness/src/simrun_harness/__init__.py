"""simrun harness."""
