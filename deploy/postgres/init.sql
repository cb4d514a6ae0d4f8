-- The send ledger's database; Temporal's two are made by temporal-sql-tool.
CREATE DATABASE smsorch;
