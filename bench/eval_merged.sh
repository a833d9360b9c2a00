#!/bin/bash
# nDCG@10 of fts and hybrid on the English dev sets and the file-name sets, with the code in $1
cd "${1:-.}"
D=/work/shared/data; T=$(mktemp -d)
for spec in "scifact:$D/scifact/vault:$D/scifact/dev_queries.jsonl:$D/scifact/dev_qrels.tsv" \
            "dendron:$D/dendron/vault:$D/known-item/dendron_dev_queries.jsonl:$D/known-item/dendron_dev_qrels.tsv" \
            "powershell:$D/powershell-docs/reference:$D/known-item/powershell_dev_queries.jsonl:$D/known-item/powershell_dev_qrels.tsv" \
            "dendron-names:$D/dendron/vault:bench/data/filename_dendron_queries.jsonl:bench/data/filename_dendron_qrels.tsv" \
            "powershell-names:$D/powershell-docs/reference:bench/data/filename_powershell_queries.jsonl:bench/data/filename_powershell_qrels.tsv"; do
  IFS=: read name vault q r <<< "$spec"
  cp -r $vault $T/$name
  .venv/bin/python -m core.cli index $T/$name >/dev/null
  echo "== $name"; .venv/bin/python -m core.cli eval $T/$name --queries $q --qrels $r --mode fts --mode hybrid --json 2>&1 | .venv/bin/python -c "
import json,sys; d=json.load(sys.stdin)
for m in d.get('modes', d.get('results', [])) if isinstance(d, dict) else d: print(m['mode'], round(m['ndcg'], 4), m.get('actual_modes'))" 2>&1 | head -5
done
