from vertex_trainer.cli import main

main()
