// placeholder: filled in by the OrchestrateStore work
