"""The adapters: side effects at the edges, below the processors and the read side.

privacy (per-user keys, sealing, API keys, tenants, Postgres roles), bus (Kafka producers, the bounded
log reader, topic admin), sdk (the publishing client), embedding, erasure, resilience (the one retry
policy), metrics, lag, topology, and the credentials each component talks with (kafka_auth, neo4j_auth,
secret_files). They may use the pure domain (domain/) and the contract (schemas/), never what stands
above them.
"""
