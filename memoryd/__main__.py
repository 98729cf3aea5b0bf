from memoryd.cli.memoryd import run

run()
