#!/bin/bash
# Before and after the workers of tune.sbatch or tune-job.yaml, from any machine that reaches
# the database:
#
#   examples/cluster/study.sh create    # make the study once, before N workers start at once
#   examples/cluster/study.sh collect   # best_config.yaml, trials.csv, reports in results/$STUDY
#
# `create` exists because N workers that start together on an empty database race to create
# Optuna's tables (optuna/optuna#1092); the Optuna CLI creates them once, and compile-tune's
# workers then load the study. `collect` measures nothing: it reads the study back.
set -euo pipefail

: "${TUNE_DB:?set TUNE_DB to the study database, e.g. postgresql://tuner@db.example.com/tune}"
STUDY=${STUDY:-hf_trainer_gpt2}

case "${1:-}" in
    create)
        exec optuna create-study --storage "$TUNE_DB" --study-name "$STUDY" --direction minimize --skip-if-exists
        ;;
    collect)
        exec compile-tune report "results/$STUDY" --storage "$TUNE_DB" --study "$STUDY"
        ;;
    *)
        echo "usage: $0 create|collect   (TUNE_DB and STUDY from the environment)" >&2
        exit 2
        ;;
esac
