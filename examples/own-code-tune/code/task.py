"""A training script tuned by Vertex AI hyperparameter tuning, reduced to what tuning needs.

Vertex AI runs it once per trial with the trial's values appended to the job's arguments
(`--learning_rate=0.0316 --layers=3 --optimizer=adam`), and reads back the metric it reports
through cloudml-hypertune (which writes JSON lines to $CLOUD_ML_HP_METRIC_FILE). A real script
would train here; this one scores its arguments with a fixed formula, so a search over it runs in
a second and its best trial is known: learning_rate near 0.1, 3 layers, adam.
"""

import argparse
import math

import hypertune


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)  # from the spec's args:
    parser.add_argument("--learning_rate", type=float, default=0.01)  # tuned
    parser.add_argument("--layers", type=int, default=1)  # tuned
    parser.add_argument("--optimizer", default="sgd")  # tuned
    args = parser.parse_args()

    # Stand-in for training and evaluating: best at learning_rate 0.1, 3 layers, adam.
    accuracy = 0.9 - 0.1 * abs(math.log10(args.learning_rate) + 1) - 0.05 * abs(args.layers - 3)
    accuracy += 0.05 if args.optimizer == "adam" else 0.0
    print(
        f"epochs={args.epochs} learning_rate={args.learning_rate} layers={args.layers} "
        f"optimizer={args.optimizer}: accuracy={accuracy:.4f}"
    )
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=accuracy, global_step=args.epochs
    )


if __name__ == "__main__":
    main()
