// placeholder: filled in by the OrchestrateModel work
