<?php

namespace App;

/** The app's session data, as SessionMiddleware loads it. */
final class Session
{
    private bool $changed = false;

    public function __construct(private array $data)
    {
    }

    public function get(string $key, mixed $default = null): mixed
    {
        return $this->data[$key] ?? $default;
    }

    public function set(string $key, mixed $value): void
    {
        $this->data[$key] = $value;
        $this->changed = true;
    }

    public function changed(): bool
    {
        return $this->changed;
    }

    public function all(): array
    {
        return $this->data;
    }
}
