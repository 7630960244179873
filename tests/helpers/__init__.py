"""Helpers shared by the test folders: broker processes, clients, waits, fakes. No tests here."""
