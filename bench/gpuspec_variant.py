#!/usr/bin/env python3
"""Writes a model-constrained variant of an Alibaba openb pod list.

PERCENT % of the pods that ask for GPUs (drawn with SEED) get a gpu_spec naming
one GPU model, drawn with weight = that model's GPUs in the node list among
the models with a node that can hold the pod (so every constrained pod still
fits somewhere); --model MODEL names one model instead (pods that no node of
it can hold stay unconstrained). The rest of each row is kept as it is.

  bench/gpuspec_variant.py --nodes NODES.csv --pods PODS.csv --percent 33 \
      [--model V100M16] [--seed 1] > PODS-gpuspec33.csv

`trainyard sim --protocol fgd` then reports failed_tasks_by_shape
["model-constrained"] per policy (docs/sim.md).
"""
import argparse
import csv
import random
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", required=True)
    p.add_argument("--pods", required=True)
    p.add_argument("--percent", type=float, required=True)
    p.add_argument("--model", default="")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    with open(a.nodes, newline="") as f:
        nodes = list(csv.DictReader(f))
    with open(a.pods, newline="") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames
        pods = list(reader)
    if "gpu_spec" not in fields:
        fields = fields + ["gpu_spec"]

    def holders(pod):
        """GPUs per model over the nodes that can hold the pod alone."""
        gpus = {}
        for n in nodes:
            if (int(n["gpu"]) >= int(pod["num_gpu"]) and int(n["cpu_milli"]) >= int(pod["cpu_milli"])
                    and int(n["memory_mib"]) >= int(pod["memory_mib"])):
                gpus[n["model"]] = gpus.get(n["model"], 0) + int(n["gpu"])
        return gpus

    rng = random.Random(a.seed)
    gpu_pods = [i for i, pod in enumerate(pods) if int(pod["num_gpu"]) > 0]
    chosen = rng.sample(gpu_pods, round(len(gpu_pods) * a.percent / 100))
    constrained = 0
    for i in sorted(chosen):
        gpus = holders(pods[i])
        if a.model:
            if a.model in gpus:
                pods[i]["gpu_spec"] = a.model
                constrained += 1
            continue
        models = sorted(gpus)
        if models:
            pods[i]["gpu_spec"] = rng.choices(models, weights=[gpus[m] for m in models])[0]
            constrained += 1
    w = csv.DictWriter(sys.stdout, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for pod in pods:
        w.writerow({k: pod.get(k) or "" for k in fields})
    print(f"{constrained} of {len(gpu_pods)} GPU pods constrained", file=sys.stderr)


if __name__ == "__main__":
    main()
