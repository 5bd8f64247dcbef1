-- part: egress
-- expect: :3: attempt to modify a read-only table
config.registries[1] = "evil.example.com"
return { allow = config.registries }
