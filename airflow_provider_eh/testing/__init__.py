"""Starting the local stack (Azurite, the local Event Hubs endpoint) for tests, benchmarks and the demo."""
