"""Checks a data set written by `lookout label` with the tools that read it: ultralytics' own `check_det_dataset`,
then a one-epoch train of a tiny YOLO from scratch (`yolov8n.yaml`, or `yolov8n-seg.yaml` when the labels are
polygons) on it, on the CPU; for `--format coco`, pycocotools' `COCO` loads each instances file and its
annotations index.

    python scripts/reference/check_label_dataset.py OUT [--seg] [--coco]
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--seg", action="store_true", help="train a segmentation model (YOLOE's polygons)")
    parser.add_argument("--coco", action="store_true")
    args = parser.parse_args()
    if args.coco:
        from pycocotools.coco import COCO

        for split in ["train", "val"]:
            path = os.path.join(args.out, "annotations", f"instances_{split}.json")
            coco = COCO(path)
            print(f"{split}: pycocotools loaded {len(coco.getImgIds())} images, {len(coco.getAnnIds())} annotations, "
                  f"{len(coco.getCatIds())} categories")
            for ann in coco.loadAnns(coco.getAnnIds()):
                if "segmentation" in ann:
                    coco.annToMask(ann)  # polygons rasterise
        return
    reference_env.forget_torchvision()
    import torchvision.ops
    from ultralytics.utils.nms import TorchNMS

    torchvision.ops.nms = TorchNMS.nms
    from ultralytics import YOLO
    from ultralytics.data.utils import check_det_dataset

    data = check_det_dataset(os.path.join(args.out, "data.yaml"))
    print(f"check_det_dataset: {data['nc']} classes {list(data['names'].values())}, train {data['train']}, val {data['val']}")
    model = YOLO("yolov8n-seg.yaml" if args.seg else "yolov8n.yaml")
    with tempfile.TemporaryDirectory() as project:
        results = model.train(data=os.path.join(args.out, "data.yaml"), epochs=1, imgsz=320, batch=8, workers=0,
                              device="cpu", plots=False, amp=False, project=project, name="check", verbose=False)
    print("one epoch trained:", json.dumps({k: round(float(v), 4) for k, v in results.results_dict.items()}))
    # The label scan the train made: every image found with its labels, none corrupt or missing.
    from pathlib import Path

    from ultralytics.data.utils import load_dataset_cache_file

    for split in ["train", "val"]:
        cache = Path(args.out) / "labels" / f"{split}.cache"
        if not cache.exists():
            continue  # an empty split
        found, missing, empty, corrupt, total = load_dataset_cache_file(cache)["results"]
        print(f"{split}: {found} label files read, {missing} missing, {empty} empty, {corrupt} corrupt, {total} images")
        if missing or corrupt or found != total:
            sys.exit(f"ultralytics found problems in the {split} labels: {missing} missing, {corrupt} corrupt")


if __name__ == "__main__":
    main()
