"""Notice new hub models and revisions, queue them durably, and run `onboard new-model` on each exactly once."""
