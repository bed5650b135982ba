<!DOCTYPE html>
<html>
<head><meta charset="UTF-8"><title>{{ $name }}</title></head>
<body>
<h1>Hello {{ $name }}</h1>
<p>Laravel {{ app()->version() }}, Blade.</p>
</body>
</html>
