#!/usr/bin/env python3
"""Generates a project of N push templates for timing `norq lint` (issue 32).

Each template is a typical one: frontmatter with ios/android/web blocks, headers and custom data, a Markdown
body with expressions, pipes, an `::: if` and an `::: each`, two samples and a data schema. norq.yaml uses the
quick start's APNs, FCM and Web Push providers (demo keys), so lint runs each provider's prepare on each sample.

    Benchmarks/lint_project.py OUT_DIR [--count 1000]
"""
import argparse
import os

PUSH_MD = """---
title: "Order #{{order.id}} shipped ({n})"
ios:
  sound: default
  badge: 1
  thread-id: orders
  interruption-level: time-sensitive
android:
  channel: orders
  priority: high
web:
  icon: https://cdn.example.com/icon.png
headers:
  apns-priority: 10
  apns-push-type: alert
  apns-collapse-id: "order-{{order.id}}"
  apns-expiration: 1h
data:
  orderId: "{{order.id}}"
  template: t{n}
---
Hey {{user.first_name | default "there"}}, your order of {{order.items | count}} items is on its way!
::: if order.express
It ships express.
:::
::: each order.items as item
- {{item.name}} x {{item.qty}}
:::
::: action
[Track]({{tracking_url}})
:::
"""

SAMPLES = """Default:
  user: {first_name: Ada}
  order:
    id: ORD-{n}
    express: true
    items:
      - {name: Mug, qty: 1}
      - {name: Tea, qty: 2}
  tracking_url: https://track.example.com/{n}
No first name:
  user: {}
  order:
    id: ORD-{n}b
    express: false
    items: []
  tracking_url: https://track.example.com/{n}b
"""

SCHEMA = """type: object
required: [order, tracking_url]
properties:
  user:
    type: object
    properties:
      first_name: { type: string }
  order:
    type: object
    required: [id, items]
    properties:
      id: { type: string, pattern: "^ORD-" }
      express: { type: boolean }
      items:
        type: array
        items:
          type: object
          required: [name, qty]
          properties:
            name: { type: string }
            qty: { type: integer, minimum: 1 }
  tracking_url: { type: string, format: uri }
"""

CONFIG = """templates: ./templates
providers:
  apns:
    config:
      keyId: DEMO000000
      teamId: TEAM123ABC
      keyPath: {root}/examples/keys/AuthKey_DEMO000000.p8
      bundleId: com.example.MyApp
  fcm:
    config:
      projectId: norq-demo
      serviceAccount: {root}/examples/keys/fcm-service-account-DEMO.json
  webpush:
    config:
      vapidPublicKey: BHXaCvRuSqOM-0R0CiHhjsBqNOemIUNyHKWXEaEFUglsWC7ykNPTJV0D-G0NvygNCbpPl7-MvV9q9JE44pwVNZs
      vapidPrivateKey: {root}/examples/keys/vapid-demo.pem
      subject: mailto:ops@example.com
routing:
  push: apns
  push.android: fcm
  push.web: webpush
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(os.path.join(args.out, "templates"), exist_ok=True)
    with open(os.path.join(args.out, "norq.yaml"), "w") as f:
        f.write(CONFIG.format(root=root))
    for n in range(args.count):
        folder = os.path.join(args.out, "templates", f"t{n:04d}")
        os.makedirs(folder, exist_ok=True)
        for name, text in (("push.md", PUSH_MD), ("data.samples.yaml", SAMPLES), ("data.schema.yaml", SCHEMA)):
            with open(os.path.join(folder, name), "w") as f:
                f.write(text.replace("{n}", str(n)))
    print(f"{args.count} templates in {args.out}")


if __name__ == "__main__":
    main()
