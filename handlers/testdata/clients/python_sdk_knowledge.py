"""Drives appkb's knowledge API through Dify's official Python SDK, unchanged.

Run by TestPythonSDKCompatibility (compat_python_test.go) with the SDK on
PYTHONPATH and the server's base URL and knowledge key in APPKB_BASE_URL and
APPKB_KNOWLEDGE_KEY. Every step prints one line; the first failure raises,
which ends the script with a traceback and a non-zero status.
"""

import asyncio
import os
import sys
import tempfile
import time
import types

# The SDK's package imports its async client, which imports aiofiles at the
# top although only async file uploads use it. Where python3-aiofiles is not
# installed, a stand-in module lets the package load; no step below uploads
# through the async client.
try:
    import aiofiles  # noqa: F401
except ImportError:
    sys.modules["aiofiles"] = types.ModuleType("aiofiles")

from dify_client import AsyncKnowledgeBaseClient, KnowledgeBaseClient  # noqa: E402

BASE = os.environ["APPKB_BASE_URL"]
KEY = os.environ["APPKB_KNOWLEDGE_KEY"]


def step(name, cond, detail=""):
    if not cond:
        raise AssertionError(f"{name}: {detail}")
    print(f"ok {name}", flush=True)


def wait_indexed(kb, batch):
    for _ in range(500):
        data = kb.batch_indexing_status(batch).json()["data"]
        if data and all(d["indexing_status"] in ("completed", "error") for d in data):
            step("indexing of batch " + batch, all(d["indexing_status"] == "completed" for d in data), data)
            return
        time.sleep(0.02)
    raise AssertionError("indexing did not finish")


def main():
    kb = KnowledgeBaseClient(KEY, base_url=BASE)
    created = kb.create_dataset(name="sdk knowledge").json()
    step("create_dataset", created.get("id"), created)
    kb.dataset_id = created["id"]
    listed = kb.list_datasets().json()
    step("list_datasets", any(d["id"] == created["id"] for d in listed["data"]), listed)

    # Documents from text: create_by_text, update_by_text.
    r = kb.create_document_by_text("cats.txt", "Cats purr when they are content.\n\nCats sleep most of the day.").json()
    doc = r["document"]["id"]
    step("create_document_by_text", doc and r["batch"], r)
    wait_indexed(kb, r["batch"])
    r = kb.update_document_by_text(doc, "cats.txt", "Cats purr. Cats climb trees and sleep in the sun.").json()
    step("update_document_by_text", r["document"]["id"] == doc, r)
    wait_indexed(kb, r["batch"])

    # Documents from files: create_by_file, update_by_file.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dogs.txt")
        with open(path, "w") as f:
            f.write("Dogs bark at the mail carrier.\n\nDogs fetch sticks.")
        r = kb.create_document_by_file(path).json()
        file_doc = r["document"]["id"]
        step("create_document_by_file", file_doc and r["document"]["name"] == "dogs.txt", r)
        wait_indexed(kb, r["batch"])
        with open(path, "w") as f:
            f.write("Dogs guard the house at night.")
        r = kb.update_document_by_file(file_doc, path).json()
        step("update_document_by_file", r["document"]["id"] == file_doc, r)
        wait_indexed(kb, r["batch"])

        docs = kb.list_documents(page=1, page_size=20).json()
        step("list_documents", {d["id"] for d in docs["data"]} >= {doc, file_doc}, docs)

        # Segments: add, query, update, delete.
        r = kb.add_segments(doc, [{"content": "Cats have whiskers.", "keywords": ["whiskers"]}]).json()
        seg = r["data"][0]["id"]
        step("add_segments", seg and r["data"][0]["content"] == "Cats have whiskers.", r)
        r = kb.query_segments(doc).json()
        step("query_segments", any(s["id"] == seg for s in r["data"]), r)
        r = kb.query_segments(doc, keyword="whiskers").json()
        step("query_segments by keyword", [s["id"] for s in r["data"]] == [seg], r)
        r = kb.update_document_segment(doc, seg, {"content": "Cats have long whiskers.", "enabled": True}).json()
        step("update_document_segment", r["data"]["content"] == "Cats have long whiskers.", r)
        resp = kb.delete_document_segment(doc, seg)
        step("delete_document_segment", resp.status_code in (200, 204), resp.status_code)

        r = kb.hit_testing("Which animal purrs?").json()
        step("hit_testing", any("purr" in rec["segment"]["content"] for rec in r["records"]), r)

        # Pipeline: plugins, file upload, a blocking run over the upload.
        r = kb.get_datasource_plugins().json()
        step("get_datasource_plugins", any(p.get("datasource_type") == "local_file" for p in r), r)
        path = os.path.join(tmp, "birds.txt")
        with open(path, "w") as f:
            f.write("Birds sing at dawn in the garden.")
        up = kb.upload_pipeline_file(path).json()
        step("upload_pipeline_file", up.get("id"), up)
        r = kb.run_rag_pipeline(
            inputs={},
            datasource_type="local_file",
            datasource_info_list=[{"related_id": up["id"], "name": "birds.txt", "transfer_method": "local_file"}],
            start_node_id="datasource_local_file",
        ).json()
        step("run_rag_pipeline", r["data"]["status"] == "succeeded", r)
        wait_indexed(kb, r["data"]["outputs"]["batch"])
        r = kb.run_rag_pipeline(
            inputs={},
            datasource_type="local_file",
            datasource_info_list=[{"reference": up["id"]}],
            start_node_id="datasource_local_file",
            response_mode="streaming",
        )
        body = r.read().decode()
        step("run_rag_pipeline streaming", "workflow_finished" in body and '"succeeded"' in body, body[-400:])

    asyncio.run(async_calls(kb.dataset_id, doc))

    resp = kb.delete_document(file_doc)
    step("delete_document", resp.status_code in (200, 204), resp.status_code)
    resp = kb.delete_dataset()
    step("delete_dataset", resp.status_code in (200, 204), resp.status_code)


async def async_calls(dataset_id, doc):
    # The async client sends every filter it was not given as an empty
    # query parameter (page=&limit=&keyword=).
    async with AsyncKnowledgeBaseClient(KEY, base_url=BASE, dataset_id=dataset_id) as kb:
        r = (await kb.list_documents()).json()
        step("async list_documents with empty filters", any(d["id"] == doc for d in r["data"]), r)
        r = (await kb.query_segments(doc)).json()
        step("async query_segments", len(r["data"]) > 0, r)


if __name__ == "__main__":
    main()
    print("done", flush=True)
