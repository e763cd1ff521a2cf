"""What several test modules share: talking to the broker under test, looking at
what it stored, and waiting for a condition instead of sleeping."""
