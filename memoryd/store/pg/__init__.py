"""The store on PostgreSQL (fleet mode: one namespace of a shared database): connections,
pools and the SQLite-shaped interface the query modules run on (`conn`), the schema's
migrations (`migrations`) and the change feed's DDL they install (`feed_ddl`)."""
