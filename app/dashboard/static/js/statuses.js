// The statuses the API names, in the order a job or a workflow goes through them.

// A workflow's job is `waiting` until its dependencies have succeeded; every other job starts at `pending`.
export const JOB_STATUSES = [
  "waiting",
  "pending",
  "scheduled",
  "queued",
  "running",
  "retrying",
  "succeeded",
  "dead_lettered",
  "cancelled",
];

export const WORKFLOW_STATUSES = ["running", "succeeded", "failed", "cancelled"];

export const TERMINAL = new Set(["succeeded", "dead_lettered", "cancelled"]);
