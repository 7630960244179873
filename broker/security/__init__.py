"""Authentication and authorization: SASL mechanisms (PLAIN, SCRAM-SHA-256/512), SCRAM credentials and ACLs kept
in the metadata journal, the ACL authorizer and the per-connection SASL state machine. Sans-IO except where a
module says otherwise."""
