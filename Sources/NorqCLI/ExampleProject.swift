/// `norq init --example`: Norq's three example notifications, each with push, email, sms and slack templates, a data
/// schema, samples and tests (push is what this router serves; the other channels' files are Norq's).
enum ExampleProject {
    /// Paths relative to `notifications/`, and their text.
    static let files: [(path: String, text: String)] = securityAlert + orderConfirmation + weeklyDigest

    static let securityAlert: [(path: String, text: String)] = [
        ("system/security-alert/push.md", """
            ---
            title: New sign-in to your account
            ios:
              sound: default
              interruption-level: time-sensitive
            android:
              channel: security
              priority: high
            headers:
              apns-priority: 10
              apns-push-type: alert
              apns-expiration: 1h
            data:
              kind: security-alert
            ---
            A sign-in from {{device}} near {{location | default "an unknown place"}} at {{signed_in_at | date "time"}}. Not you? Secure your account now.
            ::: action
            [Review]({{review_url}})
            :::

            """),
        ("system/security-alert/email.md", """
            ---
            subject: New sign-in to your account
            preheader: "A sign-in from {{device}}"
            ---
            # New sign-in

            We noticed a sign-in from **{{device}}** near {{location | default "an unknown place"}}.

            [Review your account]({{review_url}})

            """),
        ("system/security-alert/sms.md", "New sign-in from {{device}}. Not you? {{review_url}}\n"),
        ("system/security-alert/slack.md", "*New sign-in* from {{device}} near {{location | default \"an unknown place\"}}: {{review_url}}\n"),
        ("system/security-alert/data.schema.yaml", """
            type: object
            required: [device, signed_in_at, review_url]
            properties:
              device: { type: string, minLength: 1 }
              location: { type: string }
              signed_in_at: { type: string, format: date-time }
              review_url: { type: string, format: uri }

            """),
        ("system/security-alert/data.samples.yaml", """
            Default:
              device: Chrome on macOS
              location: Berlin
              signed_in_at: "2026-05-04T09:30:00Z"
              review_url: https://example.com/security
            Unknown place:
              device: Safari on iPhone
              signed_in_at: "2026-05-04T22:05:00Z"
              review_url: https://example.com/security

            """),
        ("system/security-alert/tests.yaml", """
            tests:
              - name: title
                channel: push
                assert:
                  subject: { eq: New sign-in to your account }
              - name: names the device
                channel: push
                assert:
                  body: { contains: Chrome on macOS }
                  payload_bytes: { lt: 4096 }
              - name: unknown place
                sample: Unknown place
                channel: push
                assert:
                  body: { contains: an unknown place }

            """),
    ]

    static let orderConfirmation: [(path: String, text: String)] = [
        ("transactional/order-confirmation/push.md", """
            ---
            title: "Order {{order.id}} confirmed"
            ios:
              sound: default
              thread-id: orders
            android:
              channel: orders
            headers:
              apns-push-type: alert
              apns-collapse-id: "order-{{order.id}}"
            data:
              orderId: "{{order.id}}"
            ---
            Thanks {{customer.first_name | default "there"}}! {{order.items | count}} items, {{order.total | currency "USD"}}.
            ::: action
            [View order]({{order.url}})
            :::

            """),
        ("transactional/order-confirmation/email.md", """
            ---
            subject: "Order {{order.id}} confirmed"
            preheader: "{{order.items | count}} items on their way soon"
            ---
            # Thanks for your order

            ::: each order.items as item
            - {{item.name}} x {{item.quantity}}
            :::

            Total: {{order.total | currency "USD"}}

            """),
        ("transactional/order-confirmation/sms.md", "Order {{order.id}} confirmed: {{order.total | currency \"USD\"}}. {{order.url}}\n"),
        ("transactional/order-confirmation/slack.md", "*Order {{order.id}}* confirmed ({{order.total | currency \"USD\"}})\n"),
        ("transactional/order-confirmation/data.schema.yaml", """
            type: object
            required: [order]
            $defs:
              item:
                type: object
                required: [name, quantity]
                properties:
                  name: { type: string }
                  quantity: { type: integer, minimum: 1 }
            properties:
              customer:
                type: object
                properties:
                  first_name: { type: string }
              order:
                type: object
                required: [id, items, total, url]
                properties:
                  id: { type: string, pattern: "^ORD-[0-9]+$" }
                  items: { type: array, items: { $ref: "#/$defs/item" }, minItems: 1 }
                  total: { type: number, minimum: 0 }
                  url: { type: string, format: uri }

            """),
        ("transactional/order-confirmation/data.samples.yaml", """
            Default:
              customer: { first_name: Ada }
              order:
                id: ORD-1001
                items:
                  - { name: Mug, quantity: 1 }
                  - { name: Tea, quantity: 2 }
                total: 24.5
                url: https://example.com/orders/1001
            No first name:
              order:
                id: ORD-1002
                items:
                  - { name: Kettle, quantity: 1 }
                total: 39
                url: https://example.com/orders/1002

            """),
        ("transactional/order-confirmation/tests.yaml", """
            tests:
              - name: title
                channel: push
                assert:
                  subject: { eq: Order ORD-1001 confirmed }
              - name: total
                channel: push
                assert:
                  body: { contains: "$24.50" }
              - name: default greeting
                sample: No first name
                channel: push
                assert:
                  body: { matches: "^Thanks there!" }

            """),
    ]

    static let weeklyDigest: [(path: String, text: String)] = [
        ("promotional/weekly-digest/push.md", """
            ---
            title: Your week in review
            ios:
              interruption-level: passive
              relevance-score: 0.2
            android:
              channel: digest
              priority: normal
            headers:
              apns-priority: 5
              apns-push-type: alert
              apns-expiration: 2d
            ---
            {{stats.reads}} reads and {{stats.likes}} likes this week.
            ::: if stats.top
            Top story: {{stats.top}}
            :::

            """),
        ("promotional/weekly-digest/email.md", """
            ---
            subject: Your week in review
            preheader: "{{stats.reads}} reads this week"
            ---
            # Your week

            {{stats.reads}} reads, {{stats.likes}} likes.

            """),
        ("promotional/weekly-digest/sms.md", "Your week: {{stats.reads}} reads, {{stats.likes}} likes.\n"),
        ("promotional/weekly-digest/slack.md", "*Your week*: {{stats.reads}} reads, {{stats.likes}} likes\n"),
        ("promotional/weekly-digest/data.schema.yaml", """
            type: object
            required: [stats]
            properties:
              stats:
                type: object
                required: [reads, likes]
                additionalProperties: false
                properties:
                  reads: { type: integer, minimum: 0 }
                  likes: { type: integer, minimum: 0 }
                  top: { type: string }

            """),
        ("promotional/weekly-digest/data.samples.yaml", """
            Default:
              stats: { reads: 120, likes: 14, top: Ten ways to brew tea }
            Quiet week:
              stats: { reads: 3, likes: 0 }

            """),
        ("promotional/weekly-digest/tests.yaml", """
            tests:
              - name: counts
                channel: push
                assert:
                  body: { contains: 120 reads and 14 likes }
              - name: top story only when there is one
                sample: Quiet week
                channel: push
                assert:
                  body: { not_contains: Top story }

            """),
    ]
}
