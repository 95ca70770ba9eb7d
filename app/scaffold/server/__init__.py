"""The GitHub App server: receives webhook deliveries and hands them to the App's flows.

settings   ServerSettings.from_env: the App's id, key and webhook secret
delivery   Delivery and the pure verify-and-parse step of one request
deliveries DeliveryStore: the accepted deliveries in sqlite (dedupe, replay after a crash)
work_queue the worker pool that calls the handler
metrics    Prometheus metrics on a per-app registry
ingest     the ingest pipeline: verify, store, enqueue
logs       JSON logging and secret redaction
app        create_app: the aiohttp adapter
run        serve: run the app and drain it on SIGTERM/SIGINT
"""
