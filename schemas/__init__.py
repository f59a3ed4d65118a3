"""The event contract: envelope, typed event models, JSON Schemas, upcasters, sealing codec."""
