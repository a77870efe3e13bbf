// Placeholder: the sandbox server lands here.
print("orchestrate-sandbox: not yet implemented")
