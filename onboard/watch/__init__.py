"""Notice new hub models and revisions, queue them durably, and run `onboard new-model` on each exactly once.

Modules: `types` (what passes between them), `queue` (SQLite durable queue), `hfpayload` (Hugging Face webhook
payloads), `webhook` (the HTTP receiver), `poller` (`onboard watch`), `worker` (runs or forwards jobs), `dispatch`
(GitHub `repository_dispatch`), `dedupe` (the promotion registry), `backoff` (retry delays), `service` (workers
run until a signal, for the commands).
"""
