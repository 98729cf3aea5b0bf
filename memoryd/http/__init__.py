"""What both HTTP wings stand on: the API (memoryd.server) and the web page (memoryd.web).

A row of the route table (`route.Route`), the record of services handlers call
(`services.Services`, read through the app key `SERVICES`), JSON in and out with the error
envelope (`json_io`), the query endpoints' admission (`limiter`) and the request metrics
(`metrics`). Below both, so neither wing imports the other: the daemon joins their rows
into the one table (memoryd.server.app `route_table`)."""
