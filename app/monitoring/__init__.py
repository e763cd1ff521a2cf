"""Monitoring: the broker's figures (``/metrics`` as Dropwizard JSON and in
Prometheus's text format, both summed over every worker of the instance) and the
KPI events the broker publishes about its own use."""
