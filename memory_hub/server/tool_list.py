"""FastMCP's tools/list answer for ``app.build_server``, recorded for the stdio server.

Generated: ``python -m memory_hub.server.stdio --write-tool-list``. Do not edit; tests/test_server_stdio.py fails when it differs from FastMCP's list."""

TOOLS_JSON = r'''
{
 "tools": [
  {
   "name": "search",
   "title": "Search memory",
   "description": "Search the user's memory vault and return the best-matching notes, best first.\n\nEach result has path, title, description, date, kind, score and a short snippet. Read the\ndescriptions first; call read_note(path) only for notes you actually need. When team vaults\nare searched too, results carry 'vault' and 'ref' ('vault:path'): pass ref to read_note. When\nlow_confidence is true no note really matched: the results are only the nearest notes.",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {
     "query": {
      "description": "Words, a phrase or an identifier (English or Japanese). Example: 'postgres failover runbook' or '認証 パスキー'.",
      "type": "string"
     },
     "k": {
      "default": 10,
      "description": "How many notes to return.",
      "maximum": 50,
      "minimum": 1,
      "type": "integer"
     },
     "mode": {
      "anyOf": [
       {
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Ranking mode, one of: lexical, vector, hybrid, hybrid+graph, hybrid+rerank, hybrid+graph+rerank. Leave empty for the server's default (lexical while models are still loading). 'lexical' is keyword-only; modes with 'rerank' are slower but sharper."
     },
     "kinds": {
      "anyOf": [
       {
        "items": {
         "enum": [
          "knowledge",
          "capture",
          "decision",
          "runbook",
          "tracker",
          "daily",
          "template"
         ],
         "type": "string"
        },
        "type": "array"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Only these note kinds."
     },
     "tags": {
      "anyOf": [
       {
        "items": {
         "type": "string"
        },
        "type": "array"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Only notes carrying all of these tags."
     },
     "path_prefix": {
      "anyOf": [
       {
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Only notes under this folder, e.g. 'decisions/'."
     },
     "since": {
      "anyOf": [
       {
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Only notes updated on or after this ISO date (YYYY-MM-DD)."
     }
    },
    "required": [
     "query"
    ]
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": true,
    "destructiveHint": false,
    "idempotentHint": true,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  },
  {
   "name": "recall",
   "title": "Recall relevant notes",
   "description": "A compact table of contents of the notes relevant to a prompt: a <vault-memory> block with\none line per note, 'rank|title|path|description', never note bodies. Use it at the start of\na task; open promising notes with read_note.",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {
     "prompt": {
      "description": "The user's request or the task at hand, verbatim.",
      "type": "string"
     },
     "budget_tokens": {
      "default": 600,
      "description": "Upper bound on the size of the block.",
      "maximum": 4000,
      "minimum": 50,
      "type": "integer"
     }
    },
    "required": [
     "prompt"
    ]
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": true,
    "destructiveHint": false,
    "idempotentHint": true,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  },
  {
   "name": "read_note",
   "title": "Read a note",
   "description": "Read a note's Markdown (frontmatter included), optionally a range of lines. Long notes\nsay how to fetch the rest. Reading counts as a use of the note.",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {
     "path": {
      "description": "Vault-relative path from search/recall, e.g. 'runbooks/deploy.md' (a note name also works).",
      "type": "string"
     },
     "from_line": {
      "default": 1,
      "description": "First line to return (1-based).",
      "minimum": 1,
      "type": "integer"
     },
     "max_lines": {
      "default": 400,
      "description": "How many lines to return at most.",
      "maximum": 2000,
      "minimum": 1,
      "type": "integer"
     }
    },
    "required": [
     "path"
    ]
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": true,
    "destructiveHint": false,
    "idempotentHint": true,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  },
  {
   "name": "related",
   "title": "Linked notes",
   "description": "Notes linked to or from a note within 1–2 hops, with direction ('out', 'in', 'both', or a\ntwo-step path such as 'out>in') and distance. Use it to find context around a note.",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {
     "path": {
      "description": "Vault-relative path of the starting note.",
      "type": "string"
     },
     "hops": {
      "default": 1,
      "description": "1: direct links and backlinks; 2: also their links.",
      "maximum": 2,
      "minimum": 1,
      "type": "integer"
     },
     "limit": {
      "default": 50,
      "description": "At most this many notes, nearest and most linked-to first.",
      "maximum": 500,
      "minimum": 1,
      "type": "integer"
     }
    },
    "required": [
     "path"
    ]
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": true,
    "destructiveHint": false,
    "idempotentHint": true,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  },
  {
   "name": "capture",
   "title": "Capture a memory",
   "description": "Save a new note into the vault's capture folder and index it at once. Never overwrites\nan existing note; returns the new note's path and hash (for update_note).",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {
     "text": {
      "description": "What to remember, in Markdown: the decision, fact, fix or lesson, with the why. Short and self-contained.",
      "type": "string"
     },
     "title": {
      "anyOf": [
       {
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "A short title; derived from the text when empty."
     },
     "kind": {
      "anyOf": [
       {
        "enum": [
         "knowledge",
         "capture",
         "decision",
         "runbook",
         "tracker",
         "daily",
         "template"
        ],
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Note kind; 'capture' when empty."
     },
     "tags": {
      "anyOf": [
       {
        "items": {
         "type": "string"
        },
        "type": "array"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Topic tags without '#'."
     },
     "links": {
      "anyOf": [
       {
        "items": {
         "type": "string"
        },
        "type": "array"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Names of existing notes to link with [[wikilinks]]."
     },
     "vault": {
      "anyOf": [
       {
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "A team vault's name to capture into (see search results' 'vault'); empty: the personal vault, or the team vault whose capture tags match."
     }
    },
    "required": [
     "text"
    ]
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": false,
    "destructiveHint": false,
    "idempotentHint": false,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  },
  {
   "name": "update_note",
   "title": "Update a note",
   "description": "Correct or extend an existing note, then commit the change. Read the note first: pass the\nhash read_note returned, so an edit a person made meanwhile is never overwritten (a stale\nhash is refused with the current one). Returns the new hash for a next change.",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {
     "path": {
      "description": "Vault-relative path of the note, e.g. 'decisions/use-sqlite.md'.",
      "type": "string"
     },
     "text": {
      "description": "Markdown to write. Secrets are redacted before writing.",
      "type": "string"
     },
     "expected_hash": {
      "description": "The 'hash' read_note returned for this note: the change is refused if the note changed since.",
      "type": "string"
     },
     "heading": {
      "anyOf": [
       {
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Change only this section: its heading text, e.g. 'Consequences' (or '## Consequences' to pin the level). Empty: the whole body."
     },
     "mode": {
      "default": "append",
      "description": "'append': add text at the end of the section (created when missing) or of the note; 'replace': replace the section's content (its heading stays) or the whole body (the frontmatter stays).",
      "enum": [
       "append",
       "replace"
      ],
      "type": "string"
     }
    },
    "required": [
     "path",
     "text",
     "expected_hash"
    ]
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": false,
    "destructiveHint": true,
    "idempotentHint": true,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  },
  {
   "name": "move_note",
   "title": "Move or rename a note",
   "description": "Rename or move a note and rewrite the links in other notes that pointed to it (every\nwikilink, embed and relative Markdown link form), as one commit. Notes a person is\nediting are left as they are and listed under 'skipped'. Never overwrites a file.",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {
     "path": {
      "description": "Vault-relative path of the note to move.",
      "type": "string"
     },
     "new_path": {
      "description": "Its new vault-relative path ('.md' added when missing; a path ending in '/' keeps the file name).",
      "type": "string"
     },
     "expected_hash": {
      "anyOf": [
       {
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "The 'hash' read_note returned for this note: the change is refused if the note changed since. Needed when a person is editing the note."
     }
    },
    "required": [
     "path",
     "new_path"
    ]
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": false,
    "destructiveHint": true,
    "idempotentHint": true,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  },
  {
   "name": "delete_note",
   "title": "Delete a note (to the trash)",
   "description": "Retire a note that is wrong or obsolete: it moves to the vault's .trash/ folder and the\nchange is committed, so restore_note brings it back. Lists the notes whose links to it\nnow dangle.",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {
     "path": {
      "description": "Vault-relative path of the note to retire.",
      "type": "string"
     },
     "expected_hash": {
      "anyOf": [
       {
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "The 'hash' read_note returned for this note: the change is refused if the note changed since. Needed when a person is editing the note."
     }
    },
    "required": [
     "path"
    ]
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": false,
    "destructiveHint": true,
    "idempotentHint": true,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  },
  {
   "name": "restore_note",
   "title": "Restore a deleted note",
   "description": "Bring back a note delete_note retired (from .trash/, or from git history when the trash\nwas emptied), then commit. Never overwrites a note: pass new_path if its old path is taken.",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {
     "path": {
      "description": "The deleted note's old path, or the 'trash_path' delete_note returned.",
      "type": "string"
     },
     "new_path": {
      "anyOf": [
       {
        "type": "string"
       },
       {
        "type": "null"
       }
      ],
      "default": null,
      "description": "Restore it at this path instead of its old one."
     }
    },
    "required": [
     "path"
    ]
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": false,
    "destructiveHint": false,
    "idempotentHint": true,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  },
  {
   "name": "status",
   "title": "Memory status",
   "description": "Index health: note and chunk counts, last sync, pending (not yet indexed) changes,\nembedding coverage and model, watcher state. Check it when results look stale.",
   "inputSchema": {
    "type": "object",
    "additionalProperties": false,
    "properties": {}
   },
   "outputSchema": {
    "additionalProperties": true,
    "type": "object"
   },
   "annotations": {
    "readOnlyHint": true,
    "destructiveHint": false,
    "idempotentHint": true,
    "openWorldHint": false
   },
   "_meta": {
    "fastmcp": {
     "tags": []
    }
   }
  }
 ]
}
'''
