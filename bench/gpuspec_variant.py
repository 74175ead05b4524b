#!/usr/bin/env python3
"""Writes a model-constrained (or reshaped) variant of an Alibaba openb pod list.

PERCENT % of the pods that ask for GPUs (drawn with SEED) get a gpu_spec naming
one GPU model, drawn with weight = that model's GPUs in the node list among
the models with a node that can hold the pod (so every constrained pod still
fits somewhere); --model MODEL names one model instead (pods that no node of
it can hold stay unconstrained). The rest of each row is kept as it is.

  bench/gpuspec_variant.py --nodes NODES.csv --pods PODS.csv --percent 33 \
      [--model V100M16] [--seed 1] > PODS-gpuspec33.csv

The trace family has other variants (more multi-GPU pods, more sharing, more
CPU-only load); these reshape the pods first, with the same seed, before any
constraint is drawn:
  --multigpu P   P % of the GPU pods ask for 2, 4 or 8 whole GPUs (1-GPU pods
                 drawn at random become multi-GPU, the GPU count drawn from the
                 trace's multi-GPU pods, CPU and memory scaled with it)
  --share P      P % of the GPU pods are shares of one GPU (whole 1-GPU pods
                 become shares with a gpu_milli drawn from the trace's shares,
                 or shares become whole 1-GPU pods)
  --cpu-only P   P % of all pods ask for no GPU (copies of the trace's CPU-only
                 pods, drawn at random, are added under new names)

`trainyard sim --protocol fgd` then reports failed_tasks_by_shape
["model-constrained"] per policy (docs/sim.md).
"""
import argparse
import csv
import random
import sys


def is_share(pod):
    return int(pod["num_gpu"]) == 1 and int(pod["gpu_milli"]) < 1000


def is_whole1(pod):
    return int(pod["num_gpu"]) == 1 and int(pod["gpu_milli"]) >= 1000


def reshape(pods, a, rng):
    """Applies --multigpu, --share and --cpu-only to pods, in place."""
    def gpu_pods():
        return [p for p in pods if int(p["num_gpu"]) > 0]

    if a.multigpu is not None:
        multi = [int(p["num_gpu"]) for p in pods if int(p["num_gpu"]) > 1] or [2, 4, 8]
        want = round(len(gpu_pods()) * a.multigpu / 100)
        have = sum(1 for p in pods if int(p["num_gpu"]) > 1)
        ones = [p for p in pods if is_whole1(p)]
        for pod in rng.sample(ones, max(0, min(len(ones), want - have))):
            n = rng.choice(multi)
            pod["num_gpu"] = str(n)
            pod["cpu_milli"] = str(int(pod["cpu_milli"]) * n)
            pod["memory_mib"] = str(int(pod["memory_mib"]) * n)
    if a.share is not None:
        millis = [int(p["gpu_milli"]) for p in pods if is_share(p)] or [500]
        want = round(len(gpu_pods()) * a.share / 100)
        shares = [p for p in pods if is_share(p)]
        if want > len(shares):
            ones = [p for p in pods if is_whole1(p)]
            for pod in rng.sample(ones, min(len(ones), want - len(shares))):
                pod["gpu_milli"] = str(rng.choice(millis))
        else:
            for pod in rng.sample(shares, len(shares) - want):
                pod["gpu_milli"] = "1000"
    if a.cpu_only is not None:
        cpu = [p for p in pods if int(p["num_gpu"]) == 0]
        gpu = len(pods) - len(cpu)
        # CPU-only pods c of c + gpu pods make P %: c = P * gpu / (100 - P).
        want = round(a.cpu_only * gpu / (100 - a.cpu_only)) if a.cpu_only < 100 else len(cpu)
        for i in range(max(0, want - len(cpu))):
            pod = dict(rng.choice(cpu))
            pod["name"] = f"{pod['name']}-copy{i}"
            pods.append(pod)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", required=True)
    p.add_argument("--pods", required=True)
    p.add_argument("--percent", type=float, default=0)
    p.add_argument("--multigpu", type=float)
    p.add_argument("--share", type=float)
    p.add_argument("--cpu-only", type=float)
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
    reshape(pods, a, rng)
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
