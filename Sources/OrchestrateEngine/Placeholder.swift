// placeholder: filled in by the OrchestrateEngine work
