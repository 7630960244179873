"""Client quotas (Kafka's ClientQuotaManager family): the quota store journaled as ClientQuotaRecords, the sans-IO
rate and token-bucket stats, the per-type quota managers and the `QuotaService` the broker wires them into."""
