"""What the modern groups, consumer groups (KIP-848) and share groups (KIP-932), share, as Kafka's
`org.apache.kafka.coordinator.group.modern` package: their records' common shape (`records`)."""
