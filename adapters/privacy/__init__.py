"""Crypto-shredding: per-user data keys (keystore) wrapped by rotating master keys."""
