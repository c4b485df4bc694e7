"""Test helpers shared across test folders (real servers, fixtures)."""
